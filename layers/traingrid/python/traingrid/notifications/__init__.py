"""What TrainGrid tells the account about its runs: run-status events on EventBridge."""
