"""The real-model corpus: the manifest of models, their generators and the oracle harness."""
