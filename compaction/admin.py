"""Admins review every summary: what the model wrote (raw) beside what was kept (cleaned)."""

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from .models import Compaction, Review


class Unchangeable:
    """Boundaries and their reviews are records: admins read them, never add, edit or delete."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class ReviewInline(admin.TabularInline):
    model = Review
    fields = ["action", "user", "at"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Review)
class ReviewAdmin(Unchangeable, admin.ModelAdmin):
    """Every review action across conversations: who approved, edited, discarded, regenerated
    or undid which summary, and when."""

    list_display = ["at", "action", "user", "compaction"]
    list_filter = ["action", "user"]
    list_select_related = ["user", "compaction"]
    readonly_fields = ["compaction", "action", "user", "at"]


@admin.register(Compaction)
class CompactionAdmin(Unchangeable, admin.ModelAdmin):
    list_display = [
        "id",
        "conversation",
        "trigger",
        "kind",
        "pre_tokens",
        "post_tokens",
        "summariser",
        "status",
        "edited",
        "created_at",
    ]
    list_filter = ["trigger", "kind", "status", "summariser", "edited"]
    search_fields = ["conversation__title", "summary"]
    list_select_related = ["conversation"]
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "conversation",
                    ("trigger", "kind"),
                    "status",
                    "instructions",
                    ("pre_tokens", "post_tokens"),
                    "compacted_span",
                    ("cleared_before_seq", "cleared_count"),
                    ("summariser", "edited"),
                    "error",
                    "duration_ms",
                    ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens"),
                    ("created_at", "updated_at"),
                ]
            },
        ),
        ("Summary beside the model's raw output", {"fields": [("summary", "raw_output")]}),
    ]
    readonly_fields = [f.name for f in Compaction._meta.fields] + ["compacted_span"]
    inlines = [ReviewInline]

    @admin.display(description="Compacted span")
    def compacted_span(self, obj: Compaction) -> str:
        if not obj.first_kept_seq:
            return "-"
        url = reverse("admin:chat_message_changelist")
        return format_html(
            '<a href="{}?conversation__id__exact={}&amp;seq__lt={}">Messages 1–{} of this '
            "conversation</a>",
            url,
            obj.conversation_id,
            obj.first_kept_seq,
            obj.first_kept_seq - 1,
        )
