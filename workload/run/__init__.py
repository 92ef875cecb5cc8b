"""The run on the VM: the pipeline of steps, each step's command line, where it reads and writes, what marks it
done, and the progress it reports.
"""
