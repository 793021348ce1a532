"""`UserError`: the base of every error the user can fix from the command line.

A config field, a data file, a folder that is not a run, a failed write, a run that diverged: each
module raises its own subclass (`config.ConfigError`, `data.files.DataFileError`,
`atomic.WriteError`, ...), whose message is one line naming the field or file and what was
expected. The command lines (`command_line.exits`) print that line and exit with status 2; any
other exception is a bug and keeps its traceback.
"""


class UserError(Exception):
  """Bad input or a failure the user can fix: its message is the one line the user reads."""
