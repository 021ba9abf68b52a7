-- Redis's clock, from the node that holds the key (store/redis/pubsub.py measures it there).
-- KEYS: [1] a key under the topics' hash tag
-- Returns seconds and microseconds
return redis.call('TIME')
