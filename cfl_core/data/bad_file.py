"""A data file that exists but is not what its name promises."""
from __future__ import annotations

from ..errors import DataUnavailable


class BadDataFile(DataUnavailable):
    """Raised instead of loading a malformed or foreign file.

    It is a DataUnavailable (the data set cannot be used as it is), so the CLI
    and the dashboard show it as one line; the message names the file and the fault.
    """

    def __init__(self, name: str, path: str, problem: str, how_to_get: str):
        super().__init__(name, [path], how_to_get)
        self.path = path
        self.problem = problem
        self.args = (f"{path} is not a valid {name} file: {problem}. To get good files: {how_to_get}",)
