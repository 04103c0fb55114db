from django.urls import path

from web.views import accounts, attachments, conversations, import_export, search, settings, sidebar

# One conversation's pages and endpoints live under its URL.
ONE = "conversations/<int:conversation_id>/"

urlpatterns = [
    path("", conversations.home, name="home"),
    path("accounts/signup/", accounts.signup, name="signup"),
    # The person's settings: each section's form posts to its own URL (web/views/settings.py).
    path("settings/", settings.settings_page, name="settings"),
    path("settings/defaults/", settings.settings_defaults, name="settings-defaults"),
    path("settings/password/", settings.settings_password, name="settings-password"),
    path("settings/theme/", settings.settings_theme, name="settings-theme"),
    path("settings/logout/", settings.settings_logout_everywhere, name="settings-logout"),
    path("settings/delete/", settings.settings_delete_account, name="settings-delete"),
    path("settings/export.json", settings.settings_export, name="settings-export"),
    path("conversations/", conversations.conversation_create, name="conversation-create"),
    path("conversations/import/", import_export.conversation_import, name="conversation-import"),
    path(ONE, conversations.conversation_detail, name="conversation"),
    path(ONE + "messages/", conversations.conversation_older, name="conversation-older"),
    path(ONE + "context/", conversations.conversation_context, name="conversation-context"),
    path(ONE + "window/", conversations.conversation_window, name="conversation-window"),
    path(ONE + "rename/", conversations.conversation_rename, name="conversation-rename"),
    path(ONE + "settings/", conversations.conversation_settings, name="conversation-settings"),
    path(ONE + "delete/", sidebar.conversation_delete, name="conversation-delete"),
    path(ONE + "export.json", import_export.conversation_export, name="conversation-export"),
    path(
        ONE + "export.md",
        import_export.conversation_export_markdown,
        name="conversation-export-markdown",
    ),
    path(ONE + "search.json", search.conversation_search, name="conversation-search"),
    path(ONE + "search/", search.search_page, name="conversation-search-page"),
    path("search/", search.search_page, name="search"),
    path("search.json", search.search_json, name="search-json"),
    path(ONE + "tools/", conversations.conversation_tools, name="conversation-tools"),
    path(
        ONE + "compactions/<int:compaction_id>/figures/",
        conversations.draft_figures,
        name="draft-figures",
    ),
    path(ONE + "attachments/", attachments.attachment_upload, name="attachment-upload"),
    path("attachments/<int:attachment_id>/", attachments.attachment_file, name="attachment"),
    path(
        "attachments/<int:attachment_id>/delete/",
        attachments.attachment_delete,
        name="attachment-delete",
    ),
    path("messages/<int:message_id>/pin/", conversations.message_pin, name="message-pin"),
    # The sidebar: its list and next pages, and what its rows' menus do.
    path("sidebar/", sidebar.sidebar_list, name="sidebar"),
    path("sidebar/archived/", sidebar.sidebar_list, {"view": "archived"}, name="sidebar-archived"),
    path(ONE + "pin/", sidebar.conversation_switch, {"switch": "pin"}, name="conversation-pin"),
    path(
        ONE + "archive/",
        sidebar.conversation_switch,
        {"switch": "archive"},
        name="conversation-archive",
    ),
    path(ONE + "restore/", sidebar.conversation_restore, name="conversation-restore"),
]
