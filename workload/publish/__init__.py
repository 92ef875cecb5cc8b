"""Publishing a kept model: `python -m workload.publish`, to the Hugging Face Hub or Cloud Storage."""
