"""The TrainingRun pipeline's domain: requests, plans, and the decisions of its poll loops."""
