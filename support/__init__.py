"""Test and bench support: what the tests (tests/) and the benchmarks (bench/) both use, made
public and small. Imported by tests and bench, never by the application: it may import any room
of the application, and none of them may import it.

- `fake_anthropic`: the one local fake of the Anthropic Messages API (real SSE over HTTP), in
  three modes: scripted per test (`FakeAnthropic().enqueue_reply(...)`), the same reply to
  every request (the load benches), random faults (the fault campaign). Run standalone with
  `python -m support.fake_anthropic --help`.
- `messages_api`: the API's rules a request must keep, and its prompt cache, as the fake checks
  and accounts them.
- `scripts` (what one request is answered with, and the scripted and same-reply planners) and
  `faults` (the fault campaign's planner).
- `fake_model`: `FakeClient`, the in-process fake model (no HTTP), registered like a provider
  (`providers.registry.register`).
- `fake_embeddings`: a fake embedder, registered as a real one is, and an OpenAI-compatible
  embeddings server that answers with it.
- `queries` (database queries counted on every thread), `waiting` (wait for the turn engine by
  its tasks, or for a condition), `servers` (free ports, a session cookie for a user).

May import: config, web, render, turns, tools, search, chat, compaction, providers and core.
"""
