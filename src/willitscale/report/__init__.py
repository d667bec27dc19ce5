"""Reports: timelines (text lanes, Chrome/Perfetto trace), tables and plots."""
