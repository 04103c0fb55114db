"""The admin: transcripts read-only (they are the record of what was said), and every summary
reviewable, what the model wrote (raw) beside what was kept (cleaned), with who reviewed it and
how. Registered here, in the web room, where HTML is written."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.db.models import Prefetch
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from chat.figures import dollars_spent
from chat.models import Conversation, Message, Pin
from chat.transcript import current_branch
from compaction.models import Compaction, Review
from providers.usage_columns import COLUMNS


def _dollars(conversations) -> str:
    """What some conversations cost, each priced for its own model; "-" when none is priced."""
    priced = [dollars_spent(c) for c in conversations]
    known = [d for d in priced if d is not None]
    return f"{sum(known):,.4f}" if known else "-"


class ReadOnlyMixin:
    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


class MessageInline(ReadOnlyMixin, admin.TabularInline):
    """Every version, in the order written; "on the branch" marks the ones on the user's screen
    (and in the model's window, after the latest boundary)."""

    model = Message
    fields = ["seq", "follows", "on_branch", "role", "status", "tokens", "model", "created_at"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    @admin.display(description="Follows")
    def follows(self, obj: Message) -> str:
        return f"#{obj.parent}" if obj.parent else "-"

    def get_formset(self, request, obj=None, **kwargs):
        # The branch is read once for the page (inline instances live for one request).
        self.branch = current_branch(obj) if obj is not None else set()
        return super().get_formset(request, obj, **kwargs)

    @admin.display(description="On the branch", boolean=True)
    def on_branch(self, obj: Message) -> bool:
        return obj.seq in self.branch


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "title",
        "owner",
        "model",
        "review_compactions",
        "cost",
        "updated_at",
        "deleted_at",
    ]
    list_filter = ["model", "review_compactions", "owner"]
    search_fields = ["title", "owner__username"]
    # The compaction controls are the owner's, checked in the settings (chat/controls.py).
    readonly_fields = [
        "owner",
        "model",
        "auto_compact_at",
        "keep_tail_share",
        "summary_model",
        "leaf_seq",
        "created_at",
        "updated_at",
        "deleted_at",
    ]
    inlines = [MessageInline]

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # deleting would cascade to the append-only transcript

    @admin.display(description="Cost (USD)")
    def cost(self, obj: Conversation) -> str:
        return _dollars([obj])  # its running totals: replies and summary calls


class UserWithCost(UserAdmin):
    """The users list with what each one's conversations cost (deleted ones included: they
    were paid for)."""

    list_display = [*UserAdmin.list_display, "cost"]

    def get_queryset(self, request):
        spent = Conversation.objects.only(
            "owner_id", "model", "other_models_cost", *COLUMNS
        ).order_by()
        return (
            super()
            .get_queryset(request)
            .prefetch_related(Prefetch("conversations", queryset=spent, to_attr="spent"))
        )

    @admin.display(description="Cost (USD)")
    def cost(self, obj) -> str:
        return _dollars(obj.spent)


admin.site.unregister(get_user_model())
admin.site.register(get_user_model(), UserWithCost)


@admin.register(Message)
class MessageAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = [
        "id",
        "conversation",
        "seq",
        "parent_seq",
        "role",
        "status",
        "tokens",
        "model",
        "created_at",
    ]
    list_filter = ["role", "status"]
    search_fields = ["conversation__title"]
    readonly_fields = [f.name for f in Message._meta.fields]

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Pin)
class PinAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ["id", "conversation", "message", "created_at"]


# --- compactions and their reviews ----------------------------------------------------------


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


class WrittenBy(admin.SimpleListFilter):
    """Summaries by the model that wrote them, or by the rules (the field's own filter would
    offer the rules' empty value as a link with no text)."""

    title = "written by"
    parameter_name = "written_by"
    RULES = "rules"

    def lookups(self, request, model_admin):
        models = (
            Compaction.objects.exclude(summary_model="")
            .order_by("summary_model")
            .values_list("summary_model", flat=True)
            .distinct()
        )
        return [(m, m) for m in models] + [(self.RULES, "rules (no model)")]

    def queryset(self, request, queryset):
        if self.value() is None:
            return queryset
        if self.value() == self.RULES:
            return queryset.filter(summariser="rules")
        return queryset.filter(summary_model=self.value())


@admin.register(Compaction)
class CompactionAdmin(Unchangeable, admin.ModelAdmin):
    # Few and narrow, so the list fits a 1,400 px screen beside the admin's menu and its filters:
    # the trigger and kind in one column, the tokens before and after in another, the status
    # and whether it was edited in a third, a long title cut short (static/css/admin.css).
    list_display = ["id", "conversation_title", "what", "tokens", "written_by", "state"]
    list_display_links = ["id"]
    list_filter = ["trigger", "kind", "status", "summariser", WrittenBy, "edited", "imported"]
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
                    "files",
                    ("summariser", "summary_model", "edited", "imported"),
                    "error",
                    "duration_ms",
                    ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens"),
                    ("created_at", "updated_at"),
                ]
            },
        ),
        (
            "Summary beside the model's raw output",
            {"fields": [("summary", "raw_output_shown"), "key_facts"]},
        ),
    ]
    readonly_fields = [f.name for f in Compaction._meta.fields] + [
        "compacted_span",
        "raw_output_shown",
        "key_facts",
    ]
    inlines = [ReviewInline]

    class Media:
        css = {"all": ["css/admin.css"]}

    @admin.display(description="Conversation", ordering="conversation__title")
    def conversation_title(self, obj: Compaction) -> str:
        # The whole title on hover; the column cuts it with an ellipsis (static/css/admin.css).
        title = obj.conversation.title
        return format_html('<span class="cut" title="{}">{}</span>', title, title)

    @admin.display(description="Trigger · kind", ordering="trigger")
    def what(self, obj: Compaction) -> str:
        return f"{obj.trigger} · {obj.kind}"

    @admin.display(description="Tokens", ordering="pre_tokens")
    def tokens(self, obj: Compaction) -> str:
        return f"{obj.pre_tokens:,} → {obj.post_tokens:,}"

    @admin.display(description="Written by", ordering="summary_model")
    def written_by(self, obj: Compaction) -> str:
        """Which model wrote the summary, or the rules (no model call); a clearing wrote none."""
        if obj.kind == Compaction.Kind.CLEAR:
            return "-"
        if obj.summariser == "rules":
            return "rules"
        return obj.summary_model or obj.summariser or "-"

    @admin.display(description="Status", ordering="status")
    def state(self, obj: Compaction) -> str:
        return obj.get_status_display() + (" · edited" if obj.edited else "")

    @admin.display(description="Raw output")
    def raw_output_shown(self, obj: Compaction) -> str:
        """What the model wrote; a summary the rules made (or a clearing) had no model call."""
        if obj.raw_output:
            return obj.raw_output
        if obj.kind == Compaction.Kind.CLEAR:
            return "none — tool results cleared, no model call"
        if obj.summariser == "rules":
            return "none — rule-based summary, no model output"
        return "none"

    @admin.display(description="Key facts")
    def key_facts(self, obj: Compaction) -> str:
        """How many key facts of what it replaced the summary states, and the ones it lost."""
        if not obj.facts_total:
            return "none counted"
        kept = f"kept {obj.facts_kept:,} of {obj.facts_total:,}"
        if not obj.facts_lost:
            return kept
        lost = format_html_join("", "<li>{}</li>", ((fact,) for fact in obj.facts_lost))
        return format_html("{}; lost:<ul>{}</ul>", kept, lost)

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
