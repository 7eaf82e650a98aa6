-- Reserve %(n)s job ids, ascending, for a COPY enqueue (SPEC §4.3): the ids
-- come back before the rows go in, so enqueue_many can return them in input
-- order without a RETURNING clause (COPY has none).
SELECT array_agg(id ORDER BY id)
FROM (SELECT nextval('awc.jobs_id_seq') AS id FROM generate_series(1, %(n)s)) AS reserved
