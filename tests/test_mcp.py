"""Tools from a real MCP server (`mcp-server-time`, from the package registry, over stdio through
the official SDK): offered to the model, called, errors passed on, switched off per
conversation; a server that does not start leaves the chat working."""

from __future__ import annotations

import json
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from chat.models import Conversation, Message
from config.env import env_mcp_servers
from support.waiting import settle
from tests.conftest import receive_until, shows, socket_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("channel_layer")]

TIME_SERVER = {
    "command": sys.executable,
    "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
}


@pytest.fixture
def time_server(settings):
    settings.MCP_SERVERS = {"time": TIME_SERVER}
    settings.MCP_TIMEOUT_SECONDS = 30


async def turn(user, conversation, text: str, reply_seq: int = 2) -> list[str]:
    ws = socket_for(user, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=json.dumps({"action": "send", "message": text}))
    frames = await receive_until(ws, shows(reply_seq, "complete"), timeout=40)
    await settle(conversation.pk)
    await ws.disconnect()
    return frames


@pytest.mark.usefixtures("time_server")
async def test_the_model_calls_a_tool_of_a_real_mcp_server(alice, conversation, fake_anthropic):
    fake_anthropic.enqueue_tool_calls(
        ["Checking the clock."],
        [
            ("toolu_1", "time__get_current_time", {"timezone": "Europe/Lisbon"}),
            ("toolu_2", "time__get_current_time", {"timezone": "Not/AZone"}),
        ],
    )
    fake_anthropic.enqueue_reply(["It is evening in Lisbon."])
    frames = await turn(alice, conversation, "What time is it in Lisbon?")

    offered = {t["name"]: t for t in fake_anthropic.requests[0]["tools"]}
    assert {"time__get_current_time", "time__convert_time", "search_history"} <= set(offered)
    schema = offered["time__get_current_time"]["input_schema"]
    assert schema["required"] == ["timezone"]  # the server's own schema, passed through
    assert offered["time__get_current_time"]["description"].startswith("[time] ")

    ok, bad = fake_anthropic.requests[1]["messages"][-1]["content"]
    assert "is_error" not in ok
    assert json.loads(ok["content"])["timezone"] == "Europe/Lisbon"
    assert bad["is_error"] is True and "Not/AZone" in bad["content"]
    assert fake_anthropic.invalid == []
    reply = await Message.objects.aget(conversation=conversation, seq=2)
    assert reply.status == "complete" and reply.content[-1]["text"] == "It is evening in Lisbon."
    assert 'data-tool="time__get_current_time"' in frames[-1]


@pytest.mark.usefixtures("time_server")
async def test_a_conversation_can_switch_a_tool_off(alice, conversation, fake_anthropic):
    conversation.disabled_tools = ["time__convert_time", "read_messages"]
    await conversation.asave()
    fake_anthropic.enqueue_tool_calls([], [("toolu_1", "time__convert_time", {})])
    fake_anthropic.enqueue_reply(["ok"])
    await turn(alice, conversation, "convert something")

    offered = [t["name"] for t in fake_anthropic.requests[0]["tools"]]
    assert "time__convert_time" not in offered and "read_messages" not in offered
    assert "time__get_current_time" in offered and "search_history" in offered
    (result,) = fake_anthropic.requests[1]["messages"][-1]["content"]
    assert result["is_error"] is True and "no tool named" in result["content"]


async def test_a_server_that_does_not_start_leaves_the_chat_working(
    alice, conversation, fake_anthropic, settings
):
    settings.MCP_SERVERS = {"broken": {"command": sys.executable, "args": ["-c", "import sys"]}}
    settings.MCP_TIMEOUT_SECONDS = 10
    fake_anthropic.enqueue_reply(["Still here."])
    await turn(alice, conversation, "hello")
    offered = [t["name"] for t in fake_anthropic.requests[0]["tools"]]
    assert offered == ["search_history", "read_messages", "read_attachment"]
    reply = await Message.objects.aget(conversation=conversation, seq=2)
    assert reply.status == "complete"


@pytest.mark.usefixtures("time_server")
async def test_the_tool_switches_list_every_tool_and_save_the_choice(
    async_client, alice, bob, conversation
):
    await async_client.aforce_login(alice)
    url = f"/conversations/{conversation.pk}/tools/"
    page = (await async_client.get(url)).content.decode()
    assert 'value="time__get_current_time"' in page and 'value="search_history"' in page
    assert "checked" in page
    response = await async_client.post(url, {"enabled": ["search_history", "time__convert_time"]})
    assert response.status_code in (200, 302)
    saved = await Conversation.objects.aget(pk=conversation.pk)
    assert sorted(saved.disabled_tools) == [
        "read_attachment", "read_messages", "time__get_current_time"
    ]  # fmt: skip
    await async_client.aforce_login(bob)
    assert (await async_client.get(url)).status_code == 404
    assert (await async_client.post(url, {"enabled": []})).status_code == 404


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("not json", "JSON object"),
        ('["a"]', "JSON object"),
        ('{"bad name": {"command": "x"}}', "server name"),
        ('{"t": {"args": []}}', "command"),
        ('{"t": {"command": "x", "args": "y"}}', "args"),
    ],
)
def test_a_malformed_server_list_stops_start_up(monkeypatch, raw, problem):
    monkeypatch.setenv("MCP_SERVERS", raw)
    with pytest.raises(ImproperlyConfigured, match=problem):
        env_mcp_servers("MCP_SERVERS")


async def test_a_server_that_hangs_at_start_is_not_waited_for_on_every_turn(settings):
    from core import runtime
    from tools import mcp

    settings.MCP_SERVERS = {
        "slow": {"command": sys.executable, "args": ["-c", "import time; time.sleep(60)"]}
    }
    settings.MCP_TIMEOUT_SECONDS = 1
    try:
        assert await mcp.tools() == ()  # waited once, for MCP_TIMEOUT_SECONDS, then stopped
        servers = runtime.current().loop().mcp_servers
        tried = servers["slow"]
        assert not tried.alive
        assert await mcp.tools() == ()  # resting: not started (nor waited for) again
        assert servers["slow"] is tried
    finally:
        await mcp.shutdown()
