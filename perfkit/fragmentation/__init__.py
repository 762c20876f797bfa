"""The fragmentation tool: trace, policies, replays, live run, rendering."""
