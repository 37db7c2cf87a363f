"""Adapters to AWS: the only code that calls boto3, and the one place ClientErrors become
domain errors."""
