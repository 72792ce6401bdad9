"""The operations wing: what an operator runs around a disaster.

`failover` (translate and commit group positions), `failback` (bring data and groups back),
`unreplicated` (records the other side never got), `status` (lag and translation age),
`reset_offsets`, `reset_flow`, and `report` (every human-readable table, kept apart from the
logic that computes it).
"""
