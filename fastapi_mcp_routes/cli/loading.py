"""Loading the user's app from `module:attribute`, as uvicorn takes it, with errors that say
which part failed and why."""

from __future__ import annotations

import difflib
import importlib
import inspect
import sys
import traceback
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from fastapi_mcp_routes.cli.errors import CliError

_EXAMPLE = "'main:app'"


def load_app(target: str, app_dir: Path, factory: bool) -> FastAPI:
    """The FastAPI app `target` names (`module:attribute`, the attribute may be dotted), imported
    with `app_dir` first on the import path; with `factory`, the attribute is called for it."""
    module_name, attribute = _split(target)
    sys.path.insert(0, str(app_dir.resolve()))
    module = _import(module_name, app_dir)
    found = _attribute(module, module_name, attribute)
    if factory:
        if not callable(found):
            raise CliError(f"{target!r} is a {type(found).__name__}, not a callable: leave out --factory.")
        found = _call_factory(found, target)
    elif inspect.isroutine(found):
        raise CliError(f"{target!r} is a function; if it builds the app, pass --factory to call it.")
    if not isinstance(found, FastAPI):
        raise CliError(
            f"{target!r} is not a FastAPI app (it is a {type(found).__module__}.{type(found).__qualname__}): "
            "mcp_routes serves FastAPI apps."
        )
    return found


def _split(target: str) -> tuple[str, str]:
    module_name, colon, attribute = target.partition(":")
    if not colon or not module_name or not attribute:
        raise CliError(f"APP must be 'module:attribute', as uvicorn takes it (say {_EXAMPLE}); got {target!r}.")
    return module_name, attribute


def _import(module_name: str, app_dir: Path) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise CliError(
                f"Could not import {module_name!r}: there is no module {exc.name!r} in {str(app_dir.resolve())!r} "
                "or on the import path (--app-dir says where the app's code is)."
            ) from None
        raise CliError(f"Could not import {module_name!r}: {_raised(exc)}.") from None
    except Exception as exc:
        raise CliError(f"Could not import {module_name!r}: {_raised(exc)}.") from None


def _attribute(module: Any, module_name: str, attribute: str) -> Any:
    found = module
    for part in attribute.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            names = [name for name in dir(found) if not name.startswith("_")]
            close = difflib.get_close_matches(part, names, n=3)
            hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else "."
            raise CliError(f"The module {module_name!r} has no attribute {attribute!r}{hint}") from None
    return found


def _call_factory(factory: Any, target: str) -> Any:
    try:
        return factory()
    except Exception as exc:
        raise CliError(f"The factory {target!r} failed: {_raised(exc)}.") from None


def _raised(exc: BaseException) -> str:
    """What went wrong, and where: the exception and the line of code that raised it."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    message = str(exc).rstrip(".")
    return f"{type(exc).__name__}: {message}{where}" if message else f"{type(exc).__name__}{where}"
