"""The spend watchers: autostop, which stops an idle VM, and the bill measured on the VM."""
