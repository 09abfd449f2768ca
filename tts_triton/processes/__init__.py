"""Running the server as a process: the Triton launcher and its memory guards, ports and MPS daemon, the
embedded server, ``serve``'s lifecycle (signals, drain), deep health checks, model control and the supervisor."""
