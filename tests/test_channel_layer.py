"""The single-process channel layer (core/channel_layer.py): a group send reaches every member, in
order, and a member too far behind does not hold up the others."""

from __future__ import annotations

from core.channel_layer import InMemoryLayer


async def test_a_group_send_reaches_each_member_once_in_order():
    layer = InMemoryLayer()
    one, two, other = [await layer.new_channel() for _ in range(3)]
    await layer.group_add("conversation-1", one)
    await layer.group_add("conversation-1", two)
    await layer.group_add("conversation-2", other)
    for i in range(3):
        await layer.group_send("conversation-1", {"type": "chat.html", "html": f"f{i}"})
    for channel in (one, two):
        assert [(await layer.receive(channel))["html"] for _ in range(3)] == ["f0", "f1", "f2"]
        assert channel not in layer.channels  # nothing more waits for it
    assert other not in layer.channels  # another conversation's tab got nothing
    await layer.group_send("nobody-here", {"type": "chat.html", "html": "x"})  # no error


async def test_a_full_member_misses_the_frame_and_the_others_still_get_it():
    layer = InMemoryLayer(capacity=1)
    slow, fast = await layer.new_channel(), await layer.new_channel()
    await layer.group_add("g", slow)
    await layer.group_add("g", fast)
    await layer.group_send("g", {"type": "chat.html", "html": "first"})
    assert (await layer.receive(fast))["html"] == "first"
    await layer.group_send("g", {"type": "chat.html", "html": "second"})  # slow is full
    assert (await layer.receive(fast))["html"] == "second"
    assert (await layer.receive(slow))["html"] == "first"
    assert slow not in layer.channels  # the frame it could not take is gone
