"""API keys bound to workspaces, the caller identity they grant, and how requests are checked against them."""
