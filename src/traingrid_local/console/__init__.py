"""The web console of ``traingrid serve`` (``/console``): runs, graphs, timelines, logs."""
