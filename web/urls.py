from django.urls import path

from web.views import accounts, conversations, import_export, search, sidebar

urlpatterns = [
    path("", conversations.home, name="home"),
    path("accounts/signup/", accounts.signup, name="signup"),
    path("conversations/", conversations.conversation_create, name="conversation-create"),
    path(
        "conversations/import/",
        import_export.conversation_import,
        name="conversation-import",
    ),
    path(
        "conversations/<int:conversation_id>/",
        conversations.conversation_detail,
        name="conversation",
    ),
    path(
        "conversations/<int:conversation_id>/messages/",
        conversations.conversation_older,
        name="conversation-older",
    ),
    path(
        "conversations/<int:conversation_id>/context/",
        conversations.conversation_context,
        name="conversation-context",
    ),
    path(
        "conversations/<int:conversation_id>/window/",
        conversations.conversation_window,
        name="conversation-window",
    ),
    path(
        "conversations/<int:conversation_id>/rename/",
        conversations.conversation_rename,
        name="conversation-rename",
    ),
    path(
        "conversations/<int:conversation_id>/settings/",
        conversations.conversation_settings,
        name="conversation-settings",
    ),
    path(
        "conversations/<int:conversation_id>/delete/",
        sidebar.conversation_delete,
        name="conversation-delete",
    ),
    path(
        "conversations/<int:conversation_id>/export.json",
        import_export.conversation_export,
        name="conversation-export",
    ),
    path(
        "conversations/<int:conversation_id>/export.md",
        import_export.conversation_export_markdown,
        name="conversation-export-markdown",
    ),
    path(
        "conversations/<int:conversation_id>/search.json",
        search.conversation_search,
        name="conversation-search",
    ),
    path(
        "conversations/<int:conversation_id>/search/",
        search.search_page,
        name="conversation-search-page",
    ),
    path("search/", search.search_page, name="search"),
    path("search.json", search.search_json, name="search-json"),
    path(
        "conversations/<int:conversation_id>/tools/",
        conversations.conversation_tools,
        name="conversation-tools",
    ),
    path("messages/<int:message_id>/pin/", conversations.message_pin, name="message-pin"),
    # The sidebar: its list and next pages, and what its rows' menus do.
    path("sidebar/", sidebar.sidebar_list, name="sidebar"),
    path(
        "sidebar/archived/",
        sidebar.sidebar_list,
        {"view": "archived"},
        name="sidebar-archived",
    ),
    path(
        "conversations/<int:conversation_id>/pin/",
        sidebar.conversation_switch,
        {"switch": "pin"},
        name="conversation-pin",
    ),
    path(
        "conversations/<int:conversation_id>/archive/",
        sidebar.conversation_switch,
        {"switch": "archive"},
        name="conversation-archive",
    ),
    path(
        "conversations/<int:conversation_id>/restore/",
        sidebar.conversation_restore,
        name="conversation-restore",
    ),
]
