"""Did the fine-tune make a better model: the base and the fine-tuned model's per-sample benchmark scores compared
(a paired bootstrap, `compare`), and the gate that publishing passes (`gate`). Standard library only: the gate runs
wherever publishing runs, the VM or a machine with the project's own venv.
"""
