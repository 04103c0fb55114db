"""Transcripts are read-only in the admin: they are the record of what was said."""

from django.contrib import admin

from .models import Conversation, Message, Pin


class ReadOnlyMixin:
    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


class MessageInline(ReadOnlyMixin, admin.TabularInline):
    model = Message
    fields = ["seq", "role", "status", "tokens", "model", "created_at"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "title",
        "owner",
        "model",
        "review_compactions",
        "updated_at",
        "deleted_at",
    ]
    list_filter = ["model", "review_compactions"]
    search_fields = ["title", "owner__username"]
    readonly_fields = ["owner", "model", "created_at", "updated_at", "deleted_at"]
    inlines = [MessageInline]

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # deleting would cascade to the append-only transcript


@admin.register(Message)
class MessageAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ["id", "conversation", "seq", "role", "status", "tokens", "model", "created_at"]
    list_filter = ["role", "status"]
    search_fields = ["conversation__title"]
    readonly_fields = [f.name for f in Message._meta.fields]

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Pin)
class PinAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ["id", "conversation", "message", "created_at"]
