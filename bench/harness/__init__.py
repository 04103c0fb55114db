"""The benchmarks' harness: what the scenario scripts in bench/ (load, faults, sawtooth, cache,
recall, turn_cpu, fanout) are built on.

- `processes`: child processes (spawned in their own group, stopped on every exit path, with
  the bench if it dies), uvicorn servers, the fake provider in its own process, Python helpers
  run in a configured environment, the servers' stderr in brief;
- `cpu`: CPU seconds of process trees, the database services and the machine, from /proc;
- `services`: PostgreSQL databases dropped and created, Redis flushed, a temporary SQLite file,
  users with sessions and their conversations made in a configured database;
- `client`: the load client (a process of websocket chats) and the parent's side of it;
- `stats`: percentiles, medians and ratios, a load run's figures;
- `report`: the load bench's tables, targets and notes, and its JSON;
- `charts`: text sparklines and charts, and the sawtooth's figure;
- `texts`: seeded prose and code for scripted users and fake models;
- `inprocess`: Django set up in this process on a database of its own, for in-process benches.

Test support the benches share with the tests (the fake Anthropic server, the in-process fake
model, query counting, waiting for the engine) is in support/.
"""
