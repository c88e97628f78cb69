DROP TABLE run_raw;
