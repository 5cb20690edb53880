"""Multi-turn episodes: the policy's turns interleaved with tool results or an environment's messages.

Modules, in the order an episode uses them: `tools` (functions as tools, their schemas), `template` (how the tools
are shown; the token ids of appended messages), `calls` (reading tool calls from a turn), `execution` (running them
in the reward sandbox), `environment` (the protocol, plain tools, TRL's environment_factory convention), `episode`
(one episode's ids, mask and record), `engine` (the multi-turn rollout over any engine), `signals` (the `episode/*`
metrics), `setup` (a run's agent from `agent.*`) and `verifiers_env` (a verifiers environment as an
`agent.environment`). docs/agents.md is the user's guide.
"""
