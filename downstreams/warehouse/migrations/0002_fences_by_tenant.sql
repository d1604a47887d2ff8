-- Fences are remembered per run of a tenant (shared/downstream/fences.py): the scope is the
-- JSON array [tenant, run id], since two tenants may each have a run of one id and the
-- takeovers of one must not make the other's requests stale. A scope of before is a bare run
-- id, read by nothing any more: requests now name the tenant (a dispatcher of before, or a
-- worker of it paused across the upgrade, sends none and is refused as malformed), so those
-- rows are removed rather than left to look meaningful.
DELETE FROM fences WHERE scope NOT LIKE '[%';
