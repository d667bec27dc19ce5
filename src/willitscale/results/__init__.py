"""The results store: benchmark records (:mod:`.records`), repeat statistics (:mod:`.repeats`),
the SQLite store they are kept in (:mod:`.store`), its schema versions and migrations
(:mod:`.schema`), what it hands out (:mod:`.stored`), what can go wrong with its file
(:mod:`.store_faults`), export files and reading them back (:mod:`.exchange`), and what a
damaged store still holds (:mod:`.salvage`)."""
