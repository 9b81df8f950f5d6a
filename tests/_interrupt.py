"""A Ctrl-C in the middle of a fit, for the tests of what a fit keeps."""

import numpy as np


class Interrupting:
    """Patches ``objective_class.__call__``: raises KeyboardInterrupt at
    evaluation ``after`` (0-based) and records the values (and points) of
    the evaluations before it."""

    def __init__(self, monkeypatch, objective_class, after):
        self.after, self.values, self.thetas = after, [], []
        original = objective_class.__call__
        recorder = self

        def patched(objective, theta):
            if len(recorder.values) == recorder.after:
                raise KeyboardInterrupt
            value, grad = original(objective, theta)
            recorder.values.append(value)
            recorder.thetas.append(np.array(theta))
            return value, grad

        monkeypatch.setattr(objective_class, "__call__", patched)

    def best(self):
        """(point, value) of the best evaluation before the interrupt."""
        i = int(np.argmin(self.values))
        return self.thetas[i], self.values[i]
