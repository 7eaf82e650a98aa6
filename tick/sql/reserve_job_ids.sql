-- Reserve %(n)s job ids for a COPY enqueue (SPEC §4.3): the ids come back
-- before the rows go in, so enqueue_many can return them in input order
-- without a RETURNING clause (COPY has none). Streamed, not stored: the
-- series in the select list (a set-returning function in FROM is kept in
-- a tuplestore), no ORDER BY (the caller sorts the ids, in order already:
-- one linear pass). Either, for a million ids, went past a role's
-- temp_file_limit.
SELECT array_agg(nextval('awc.jobs_id_seq')) FROM (SELECT generate_series(1, %(n)s)) AS s
