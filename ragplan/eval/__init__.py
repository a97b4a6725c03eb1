"""The evaluation runner every benchmark plugs into: benchmarks give items, a grader and table columns."""
