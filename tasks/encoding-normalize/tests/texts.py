TEXTS = {
    "notes/meeting.txt": "Agenda:\n- Café budget: 1 200 €? No, in £.\n- Naïve plan\n",
    "notes/jp.txt": "東京の会議\n温度: 25°C\n",
    "legacy/kunden.txt": "Müller, Jürgen;Köln\nGroß, Ærø;Århus\n",
    "legacy/quotes.md": "# “Smart” quotes\n\nIt’s 5 € — “really”…\n",
    "readme.txt": "Plain ASCII readme\nsecond line\n",
}
