"""Transcripts are read-only in the admin: they are the record of what was said."""

from django.contrib import admin
from django.db.models import IntegerField, OuterRef, Subquery, Sum, Value
from django.db.models.functions import Coalesce

from compaction.models import Compaction
from providers.prices import cost

from .models import USAGE_COLUMNS, Conversation, Message, Pin


def _summed(model, column: str):
    rows = model.objects.filter(conversation=OuterRef("pk")).order_by().values("conversation")
    total = rows.annotate(total=Sum(column)).values("total")
    return Coalesce(Subquery(total, output_field=IntegerField()), Value(0))


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
        "cost",
        "updated_at",
        "deleted_at",
    ]
    list_filter = ["model", "review_compactions", "owner"]
    search_fields = ["title", "owner__username"]
    readonly_fields = ["owner", "model", "created_at", "updated_at", "deleted_at"]
    inlines = [MessageInline]

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # deleting would cascade to the append-only transcript

    def get_queryset(self, request):
        # Usage of its replies and summary calls, summed in the same query as the list.
        sums = {
            f"spent_{column}": _summed(Message, column) + _summed(Compaction, column)
            for column in USAGE_COLUMNS
        }
        return super().get_queryset(request).annotate(**sums)

    @admin.display(description="Cost (USD)")
    def cost(self, obj: Conversation) -> str:
        usage = Message(**{c: getattr(obj, f"spent_{c}") for c in USAGE_COLUMNS}).usage
        dollars = cost(usage, obj.model)
        return "-" if dollars is None else f"{dollars:,.4f}"


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
