"""The chart payload column is gone: payloads live in storage (0011 moved them)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('reviewapp', '0011_move_chart_payloads'),
    ]

    operations = [
        migrations.RemoveField(
            model_name='comparisonchart',
            name='payload',
        ),
    ]
