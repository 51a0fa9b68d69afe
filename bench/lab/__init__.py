"""The model-selection lab: what the model and the gate are worth against baselines, regimes,
ceilings and replays of many nights (`python -m bench.lab.quality`, `... .goal_reach`, `... .replay`,
`... .ensemble`). bench/'s other modules measure throughput, memory and cost."""
