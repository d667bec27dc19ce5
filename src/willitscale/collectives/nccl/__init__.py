"""NCCL as it runs a collective (v2.30.7): its tuning tables (:mod:`.tables`), the system its
topology search finds (:mod:`.system`), its cost per (algorithm, protocol) (:mod:`.model`), and
the pick and achieved time the estimate uses (:mod:`.run`)."""
