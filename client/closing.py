"""``with`` support shared by the blocking clients (the asyncio client has its own ``async with``)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Self

__all__ = ["Closing"]


class Closing(ABC):
    """A client that ``with`` closes at the end of the block."""

    @abstractmethod
    def close(self) -> None:
        """Release the client's connections. Idempotent."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
