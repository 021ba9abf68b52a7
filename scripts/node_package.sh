#!/usr/bin/env bash
# Prints how to run a script of an npm package: the absolute path of a Node new enough for it,
# then the absolute path of the script, one a line. Installs what is missing on first use, into
# .tools/ (which git ignores): the package into .tools/<name>-<version>, and Node 22 (the npm
# package node@22) into .tools/node22 when the machine's Node is older than NODE_MIN.
#
#   scripts/node_package.sh @modelcontextprotocol/inspector 2.12.0 clients/launcher/build/index.js
#
# Shared by scripts/conformance.sh and the tests that drive npm tools. Each install is made in a
# folder of its own and moved into place once complete, so an interrupted install, or another
# checkout sharing .tools, never leaves half a package where it is looked for.
set -euo pipefail
cd "$(dirname "$0")/.."

# The Inspector 2.x asks for 22.19 (its engines field), the conformance suite for 22: one floor.
NODE_MIN_MAJOR=22
NODE_MIN_MINOR=19
TOOLS=$PWD/.tools

if [ $# -ne 3 ]; then
  echo "usage: $0 PACKAGE VERSION SCRIPT (SCRIPT relative to the package's folder)" >&2
  exit 2
fi
package=$1
version=$2
script=$3

fail() {
  echo "$*" >&2
  exit 1
}

new_enough() {  # NODE: whether that Node is NODE_MIN_MAJOR.NODE_MIN_MINOR or newer
  local found major minor
  found=$("$1" --version 2>/dev/null) || return 1
  found=${found#v}
  major=${found%%.*}
  minor=${found#*.}
  minor=${minor%%.*}
  [[ $major =~ ^[0-9]+$ && $minor =~ ^[0-9]+$ ]] || return 1
  ((major > NODE_MIN_MAJOR || (major == NODE_MIN_MAJOR && minor >= NODE_MIN_MINOR)))
}

install_into() {  # DIR SPEC FILE: unless DIR/FILE exists, npm installs SPEC into DIR
  local dir=$1 spec=$2 file=$3 partial
  [ -e "$dir/$file" ] && return 0
  command -v npm >/dev/null ||
    fail "npm is needed to install $spec into $dir and was not found: install Node.js with npm" \
      "(https://nodejs.org, or apt install nodejs npm) and run again."
  partial="$dir.partial-$$"
  rm -rf "$partial"
  if ! npm install --prefix "$partial" --no-audit --no-fund --loglevel error "$spec" >&2; then
    rm -rf "$partial"
    fail "npm could not install $spec into $dir (see its output above): check that" \
      "https://registry.npmjs.org can be reached (or npm's registry setting) and run again."
  fi
  # A folder without FILE is what an interrupted install left before installs were moved in.
  if [ -e "$dir" ] && [ ! -e "$dir/$file" ]; then rm -rf "$dir"; fi
  # Another run may have moved its own copy in meanwhile: then that one stays.
  mv -T "$partial" "$dir" 2>/dev/null || rm -rf "$partial"
  [ -e "$dir/$file" ] || fail "$spec was installed into $dir but has no $file."
}

node=$(command -v node || true)
if [ -z "$node" ] || ! new_enough "$node"; then
  install_into "$TOOLS/node22" node@22 node_modules/.bin/node
  node=$TOOLS/node22/node_modules/.bin/node
  new_enough "$node" ||
    fail "$package needs Node $NODE_MIN_MAJOR.$NODE_MIN_MINOR or newer; $node is $("$node" --version):" \
      "remove $TOOLS/node22 and run again, or install a newer Node (https://nodejs.org)."
fi
# The package's install scripts run with that Node too.
PATH="$(dirname "$node"):$PATH"
export PATH

dir=$TOOLS/${package##*/}-$version
install_into "$dir" "$package@$version" "node_modules/$package/package.json"
entry=$dir/node_modules/$package/$script
[ -f "$entry" ] || fail "$package@$version has no $script (looked for $entry)."
printf '%s\n%s\n' "$node" "$entry"
