"""`scheduler`: the command line (scheduler_cli.main) and the console server
(scheduler_cli.console) for a serverless-scheduler API, local or deployed."""
