from django.urls import path

from chat.web import search_views, sidebar_views, views

urlpatterns = [
    path("", views.home, name="home"),
    path("accounts/signup/", views.signup, name="signup"),
    path("conversations/", views.conversation_create, name="conversation-create"),
    path("conversations/import/", views.conversation_import, name="conversation-import"),
    path("conversations/<int:conversation_id>/", views.conversation_detail, name="conversation"),
    path(
        "conversations/<int:conversation_id>/messages/",
        views.conversation_older,
        name="conversation-older",
    ),
    path(
        "conversations/<int:conversation_id>/context/",
        views.conversation_context,
        name="conversation-context",
    ),
    path(
        "conversations/<int:conversation_id>/window/",
        views.conversation_window,
        name="conversation-window",
    ),
    path(
        "conversations/<int:conversation_id>/rename/",
        views.conversation_rename,
        name="conversation-rename",
    ),
    path(
        "conversations/<int:conversation_id>/settings/",
        views.conversation_settings,
        name="conversation-settings",
    ),
    path(
        "conversations/<int:conversation_id>/delete/",
        sidebar_views.conversation_delete,
        name="conversation-delete",
    ),
    path(
        "conversations/<int:conversation_id>/export.json",
        views.conversation_export,
        name="conversation-export",
    ),
    path(
        "conversations/<int:conversation_id>/export.md",
        views.conversation_export_markdown,
        name="conversation-export-markdown",
    ),
    path(
        "conversations/<int:conversation_id>/search.json",
        search_views.conversation_search,
        name="conversation-search",
    ),
    path(
        "conversations/<int:conversation_id>/search/",
        search_views.search_page,
        name="conversation-search-page",
    ),
    path("search/", search_views.search_page, name="search"),
    path("search.json", search_views.search_json, name="search-json"),
    path(
        "conversations/<int:conversation_id>/tools/",
        views.conversation_tools,
        name="conversation-tools",
    ),
    path("messages/<int:message_id>/pin/", views.message_pin, name="message-pin"),
    # The sidebar: its list and next pages, and what its rows' menus do.
    path("sidebar/", sidebar_views.sidebar_list, name="sidebar"),
    path(
        "sidebar/archived/",
        sidebar_views.sidebar_list,
        {"view": "archived"},
        name="sidebar-archived",
    ),
    path(
        "conversations/<int:conversation_id>/pin/",
        sidebar_views.conversation_switch,
        {"switch": "pin"},
        name="conversation-pin",
    ),
    path(
        "conversations/<int:conversation_id>/archive/",
        sidebar_views.conversation_switch,
        {"switch": "archive"},
        name="conversation-archive",
    ),
    path(
        "conversations/<int:conversation_id>/restore/",
        sidebar_views.conversation_restore,
        name="conversation-restore",
    ),
]
