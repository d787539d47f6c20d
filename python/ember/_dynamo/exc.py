"""torch._dynamo.exc: the errors compilation raises. ember never compiles, so
nothing raises them; `except torch._dynamo.exc.Unsupported:` clauses work."""


class TorchDynamoException(RuntimeError):
    pass


class Unsupported(TorchDynamoException):
    pass


class BackendCompilerFailed(TorchDynamoException):
    pass
