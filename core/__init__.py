"""What every room may use: the database call (`db`), the one error family (`errors`), input
checked at the edge (`clean`), the channel layer and its groups (`channel_layer`), the outbox that
tells every tab what happened (`outbox`), and the process's runtime object (`runtime`).

Every other room imports it, never the reverse.

May import: nothing.
"""
