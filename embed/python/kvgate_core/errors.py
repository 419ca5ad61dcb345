"""Status codes of libkvgate (kvgate.h, docs/abi.md) and the exception that carries them."""

STATUS = {
    "OK": 0, "STATE": -1, "NO_MEMORY": -2, "BAD_ARG": -3, "BAD_SLOT": -4, "CAPACITY": -5,
    "PARENT_NOT_FOUND": -6, "INVALID_SEQUENCE": -7, "CORRUPT": -8, "TOO_LONG": -9,
    "INGEST_FALLBACK": -21, "INGEST_FULL": -22, "NULL": -30, "BUFFER": -31, "TRAP": -32, "ABI": -33, "BROKEN": -34,
}
NAMES = {v: k for k, v in STATUS.items()}


class KvgateError(Exception):
    """A negative status from libkvgate: `status` is the code, `name` its STATUS key, the message its detail."""

    def __init__(self, status: int, message: str):
        super().__init__(f"{message} (KVGATE_E_{NAMES.get(status, status)})")
        self.status = status
        self.name = NAMES.get(status, str(status))
