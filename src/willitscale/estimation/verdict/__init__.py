"""What limits a step and what would fix it: the one criterion and its probes (:mod:`.levers`),
the data-parallel verdict (:mod:`.bottleneck`) and the model-parallel one (:mod:`.mpbottleneck`)."""
