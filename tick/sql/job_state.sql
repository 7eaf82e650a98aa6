-- One job's state, for operator messages.
SELECT state FROM awc.jobs WHERE id = %(id)s
