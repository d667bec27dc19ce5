"""The planner and studies built on the estimate: plan search (:mod:`.search`) and why its top
plans win (:mod:`.explain`), scaling sweeps (:mod:`.scaling`), network requirements
(:mod:`.requirements`) and cluster sizing (:mod:`.sizing`)."""
