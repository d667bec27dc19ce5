"""The results store: benchmark records (:mod:`.records`), repeat statistics
(:mod:`.repeats`) and the SQLite store they are kept in (:mod:`.store`)."""
