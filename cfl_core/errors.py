"""Errors that carry a message meant for people, not a traceback."""


class ConfigError(ValueError):
    """A request that cannot work, found before any work is done.

    The message always names the parameter, the value given and what is allowed,
    so the CLI and the dashboard can show it as it is.
    """

    def __init__(self, parameter: str, value, allowed: str):
        self.parameter = parameter
        self.value = value
        self.allowed = allowed
        super().__init__(f"{parameter}={_shown(value)} is not allowed: {allowed}")


SHOWN_DEPTH = 8  # a value nested deeper is described, not printed (repr of 100,000 levels raised RecursionError)
SHOWN_CHARS = 200  # a longer value is cut: the message stays one readable line


def _shown(value) -> str:
    """The value as given, but a whole number of more than 18 digits in scientific notation (1e300, not 301 digits),
    a deeply nested value described by its depth and a long one cut after SHOWN_CHARS characters."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**18:
        digits = str(abs(value))
        return f"{'-' if value < 0 else ''}{digits[0]}.{digits[1:4]}e+{len(digits) - 1}"
    if nesting_depth(value, SHOWN_DEPTH) > SHOWN_DEPTH:
        return f"<a {type(value).__name__} nested more than {SHOWN_DEPTH} levels deep>"
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + f"... ({len(text)} characters)"


shown = _shown  # the public name (the dashboard's link notes show a bad value the same way)


def nesting_depth(value, limit: int) -> int:
    """How deep lists, tuples and dicts nest in `value`, counted without recursion and only to `limit` + 1."""
    depth, level, stack = 0, 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        depth = max(depth, level)
        if depth > limit:
            return depth
        stack.extend((child, level + 1) for child in children)
    return depth


class DataUnavailable(RuntimeError):
    """A data source whose files are not on this machine.

    `searched` lists every place looked in; `how_to_get` is a one-line instruction.
    """

    def __init__(self, name: str, searched: list[str], how_to_get: str):
        self.name = name
        self.searched = list(searched)
        self.how_to_get = how_to_get
        where = ", ".join(self.searched) if self.searched else "nowhere"
        super().__init__(f"data set {name!r} was not found (looked in: {where}). To get it: {how_to_get}")


class Diverged(RuntimeError):
    """Training blew up: non-finite numbers (inf or NaN), or losses a thousand times those of the initial models.

    The run stops with status `diverged`. `what` says what blew up; the experiment adds where (the
    round, or the set-up) and the learning rate, the usual cause."""

    def __init__(self, what: str, where: str | None = None, lr: float | None = None):
        self.what = what
        self.where = where
        self.lr = lr
        text = f"training diverged {where or 'during training'}: {what}."
        if lr is not None:
            text += (f" The likely cause is the learning rate (lr={lr:g}): try a smaller one, e.g. lr={lr / 10:g}"
                     " (or fewer local epochs)")
        super().__init__(text)


class ResumeError(ValueError):
    """A run folder that cannot be resumed; the message says why (finished, no config, damaged, ...)."""


class MissingExtra(RuntimeError):
    """An optional library a request needs is not installed; the message names the extra that brings it."""

    def __init__(self, what: str, library: str, extra: str):
        self.what, self.library, self.extra = what, library, extra
        super().__init__(f"{what} needs {library}, which is not installed here: pip install 'cfl-lab[{extra}]' "
                         "(or pip install -r requirements-test.txt)")
