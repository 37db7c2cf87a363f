"""The janitor: releases what TrainGrid's executions left behind when they stopped early."""
