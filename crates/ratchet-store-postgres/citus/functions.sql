-- Settings of the functions on a Citus coordinator, applied after them. Citus cannot route a
-- statement of a generic plan that writes through a CTE with parameters ("could not create
-- distributed plan"), so the functions on distributed tables plan each call with its values.
ALTER FUNCTION ratchet.event_first_match SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION ratchet.event_append SET plan_cache_mode = force_custom_plan;
